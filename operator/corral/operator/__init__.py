"""corral's operator: reconcilers of management objects (`management`), an agent per downstream
cluster (`downstream`), and the contract of node drivers (`drivers`)."""
