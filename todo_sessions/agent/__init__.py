"""The agent side: the model interface, the scripted model and the agent loop."""
