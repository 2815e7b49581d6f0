"""pgs: the agent that fixes issues, checked by properties."""
