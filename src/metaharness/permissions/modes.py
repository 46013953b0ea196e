"""The permission modes and workspace modes: the one list of each.

Pure constants, importable without the engine (the CLI builds its options from them at
start-up). Both lists are ordered least permissive first: a subagent takes the earlier of
its parent's and its own.
"""

MODES = ("plan", "manual", "accept-edits", "auto", "bypass")
WORKSPACE_MODES = ("read-only", "workspace-write", "full-access")

#: What the UI must say when entering Bypass.
BYPASS_NOTICE = ("Bypass: every call runs unless a deny rule or workspaceMode stops it, "
                 "or a deny rule cannot be ruled out")
