"""The other built-in tools: webfetch, skill, todo, agent.

Rules they keep: webfetch speaks only http/https, follows at most 5 redirects itself
and vets every target with `ctx.admit_url` before following it (docs/reference/permissions.md),
and returns text (HTML reduced to its readable text); skill reads `<dir>/<name>/SKILL.md`
from the configured skills directories, first match wins; todo is inert (it only keeps
the list); agent runs a nested loop whose calls go through the same per-call seam.
"""

from __future__ import annotations

import os
import re
from typing import Any

from .base import Tool, ToolContext, ToolFailure, ToolOutput, cap_text

FETCH_TIMEOUT_S = 30.0
FETCH_MAX_REDIRECTS = 5
FETCH_CAP_CHARS = 100_000
SKILL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class WebFetchTool(Tool):
    name = "webfetch"
    description = "Fetch a URL with HTTP GET and return its text (HTML is reduced to readable text)."
    input_schema = {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        import httpx

        url = args["url"]
        for hop in range(FETCH_MAX_REDIRECTS + 1):
            scheme = httpx.URL(url).scheme if "://" in url else ""
            if scheme not in ("http", "https"):
                raise ToolFailure(f"only http and https URLs can be fetched, not {url!r}")
            if ctx.admit_url is not None:
                refusal = await ctx.admit_url(url)
                if refusal:
                    raise ToolFailure(refusal if hop == 0 else f"the redirect to {url} was not followed: {refusal}")
            try:
                async with httpx.AsyncClient(timeout=FETCH_TIMEOUT_S, follow_redirects=False) as client:
                    response = await client.get(url, headers={"user-agent": "oharness"})
            except httpx.HTTPError as exc:
                raise ToolFailure(f"fetching {url} failed: {exc or type(exc).__name__}") from None
            if response.is_redirect and "location" in response.headers:
                url = str(response.url.join(response.headers["location"]))
                continue
            break
        else:
            raise ToolFailure(f"more than {FETCH_MAX_REDIRECTS} redirects; stopped at {url}")
        kind = response.headers.get("content-type", "")
        text = response.text
        from .html_text import html_to_text

        if "html" in kind or text.lstrip()[:15].lower().startswith(("<!doctype html", "<html")):
            text = html_to_text(text)
        if response.status_code >= 400:
            return ToolOutput(cap_text(f"HTTP {response.status_code} from {url}\n{text}", 2000), is_error=True)
        return ToolOutput(cap_text(text, FETCH_CAP_CHARS) or "(empty response)")


def list_skills(dirs: list[str]) -> list[str]:
    names: list[str] = []
    for directory in dirs:
        try:
            entries = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in entries:
            if name not in names and os.path.isfile(os.path.join(directory, name, "SKILL.md")):
                names.append(name)
    return names


class SkillTool(Tool):
    name = "skill"
    description = "Load a skill's instructions (its SKILL.md) by name."
    input_schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        name = args["name"]
        if not SKILL_NAME.match(name):
            raise ToolFailure(f"{name!r} is not a skill name")
        for directory in ctx.skills_dirs:
            path = os.path.join(directory, name, "SKILL.md")
            if os.path.isfile(path):
                with open(path, encoding="utf-8", errors="replace") as handle:
                    return ToolOutput(cap_text(handle.read()))
        known = list_skills(ctx.skills_dirs)
        raise ToolFailure(
            f"no skill named {name!r}" + (f"; available: {', '.join(known)}" if known else "; no skills are installed")
        )


class TodoTool(Tool):
    name = "todo"
    description = (
        "Replace the task list. `items` is a list of strings or of {content, status} objects "
        "(status: pending, in_progress, completed)."
    )
    input_schema = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {}}},
        "required": ["items"],
    }
    STATUSES = ("pending", "in_progress", "completed")

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        items: list[dict[str, Any]] = []
        for number, item in enumerate(args["items"]):
            if isinstance(item, str):
                items.append({"content": item, "status": "pending"})
            elif isinstance(item, dict) and isinstance(item.get("content"), str):
                status = item.get("status", "pending")
                if status not in self.STATUSES:
                    raise ToolFailure(f"item {number} has status {status!r}; use one of {', '.join(self.STATUSES)}")
                items.append({"content": item["content"], "status": status})
            else:
                raise ToolFailure(f"item {number} must be a string or an object with `content`")
        ctx.todos[:] = items
        marks = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}
        return ToolOutput("\n".join(f"{marks[i['status']]} {i['content']}" for i in items) or "(the list is empty)")


class AgentTool(Tool):
    name = "agent"
    description = (
        "Hand a self-contained task to a subagent: it works with the same tools (except agent) "
        "and returns its final answer."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "prompt": {"type": "string"},
            "type": {"type": "string", "description": "subagent type (default: general)"},
        },
        "required": ["prompt"],
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        if ctx.spawn_agent is None:
            raise ToolFailure("subagents cannot be spawned from here")
        answer = await ctx.spawn_agent(args["prompt"], args.get("type"))
        return ToolOutput(answer or "(the subagent gave no answer)")
