"""The hookproof pytest plugin (being written): inert unless the user opts in."""
