"""Channel adapters: wire params -> service call -> wire result, one module per area."""
