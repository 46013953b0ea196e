"""R, the project-scope rules of the permission test cases, shared by the permission tests."""

R = {
    "allow": ["Bash(npm run test:*)", "mcp__github__get_*"],
    "ask": ["Bash(git push*)"],
    "deny": ["Bash(rm -rf *)", "write(.env*)"],
}
