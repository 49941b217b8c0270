"""Node drivers: what makes and destroys the machines of node pools, behind one contract
(`contract.NodeDriver`). No driver is implemented yet; a node pool reconciler will pick one by
the node template's driver name and keep the Node CRs it creates, which the node mirror leaves
alone (they carry no mirror label)."""
