"""Projects: role templates, quota arithmetic, what lands downstream, and project conditions."""
