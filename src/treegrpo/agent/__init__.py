"""The ReAct search protocol of Search-R1 at token level: prompt, step ends, actions,
observations and masks."""
