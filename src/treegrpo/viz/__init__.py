"""Plots and pages for people to look at. Figures use matplotlib's object API
(``matplotlib.figure.Figure``): no pyplot state and no backend to choose, so plotting works
headless and from any thread."""
