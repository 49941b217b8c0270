"""Node drivers, their pure rules: where an executable may come from and how it is checked
(`source`), what a driver says its `<driver>Config` holds (`schema`), and what a NodeDriver's
conditions say (`status`)."""
