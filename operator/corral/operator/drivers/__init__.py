"""Node drivers: what makes and destroys the machines of node pools, behind one contract
(`contract.NodeDriver`). The registry (`registry.Drivers`) picks one by the node template's
driver name: the builtin kwok driver, or a downloaded executable."""
