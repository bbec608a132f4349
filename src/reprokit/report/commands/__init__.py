"""The command lines of reprokit.report (`python -m reprokit.report.commands.<name>`, or `reprokit <name>`).

The top layer: a command may import store/, verdicts/ and render/; nothing imports a command.
"""
