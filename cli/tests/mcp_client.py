"""Drives `weft mcp` with the official MCP Python SDK (PyPI `mcp`), as an
assistant would, and checks what comes back against the fixture files.

    python mcp_client.py stdio FIXTURE_ROOT WEFT_BINARY   (env: WEFT_DATA_DIR, WEFT_MODEL_DIR)
    python mcp_client.py http  FIXTURE_ROOT URL
    python mcp_client.py scoped FIXTURE_ROOT URL DEMO_KEY OTHER_KEY DEMO_CHUNK MISSING_CHUNK
        (API keys: demo, another project; chunk ids: one of demo, one nothing has)
    python mcp_client.py indexing ROOT URL READER_KEY INDEXER_KEY OUTSIDE ESCAPE
        (weft mcp --allow-index --index-root ROOT; a reading and an indexing key)

Prints one JSON object (what was checked) on the last line of stdout;
exits non-zero with the failed check's message otherwise.
"""

import asyncio
import json
import os
import re
import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters

CITATION = re.compile(r"^(?P<uri>.+)#L(?P<start>\d+)-L(?P<end>\d+)$")


def text_of(result):
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def check_span(root, span, report):
    """The citation names exactly the lines the span holds."""
    m = CITATION.match(span["citation"])
    assert m, f"not a citation: {span['citation']!r}"
    uri, start, end = m["uri"], int(m["start"]), int(m["end"])
    assert (uri, start, end) == (span["uri"], span["start_line"], span["end_line"]), span
    with open(os.path.join(root, uri), encoding="utf-8") as f:
        lines = f.read().split("\n")
    cited = lines[start - 1 : end]
    got = span["content"].split("\n")
    # A chunk that starts mid-line (indented member) lacks the indentation.
    assert len(got) == len(cited), f"{span['citation']}: {len(got)} lines, cited {len(cited)}"
    for n, (a, b) in enumerate(zip(got, cited)):
        assert a.strip() == b.strip(), f"{span['citation']} line {start + n}: {a!r} != {b!r}"
    report["citations_checked"].append(span["citation"])


async def session(client, root, report):
    assert client.server_info is not None and client.server_info.name == "weft", client.server_info
    report["protocol_version"] = client.protocol_version
    tools = {t.name: t for t in (await client.list_tools()).tools}
    report["tools"] = sorted(tools)
    assert set(tools) == {"search", "get_context", "list_projects"}, tools.keys()
    for name in ("search", "get_context"):
        t = tools[name]
        assert t.description and len(t.description) > 40, t
        assert t.input_schema.get("type") == "object", t.input_schema
        assert "max_tokens" in t.input_schema["properties"], t.input_schema
    assert tools["search"].input_schema.get("required") == ["query"], tools["search"].input_schema

    # search: packed context within the budget, every citation resolving.
    result = await client.call_tool(
        "search", {"query": "exponential backoff between retry attempts", "max_tokens": 400}
    )
    assert not result.is_error, text_of(result)
    pack = result.structured_content
    assert pack["max_tokens"] == 400 and pack["used_tokens"] <= 400, pack
    assert pack["spans"], pack
    top = pack["spans"][0]
    assert top["uri"] == "src/Retry.java", [s["citation"] for s in pack["spans"]]
    assert top["project"] == "demo", top
    for span in pack["spans"]:
        check_span(root, span, report)
        assert span["citation"] in text_of(result), "the markdown cites every span"

    # Filters: only prose, only under docs/.
    result = await client.call_tool(
        "search",
        {"query": "log rotation", "content_types": ["prose"], "paths": ["docs/**/*.md"], "mode": "text"},
    )
    assert not result.is_error, text_of(result)
    uris = {s["uri"] for s in result.structured_content["spans"]}
    assert uris == {"docs/logging.md"}, uris

    # get_context: the cited method widened to its surroundings.
    cited = next(s for s in pack["spans"] if "backoff" in s["content"])
    m = CITATION.match(cited["citation"])
    first_line = int(m["start"])
    narrow = f"{cited['uri']}#L{first_line}-L{first_line}"
    result = await client.call_tool(
        "get_context", {"citation": narrow, "project": "demo", "max_tokens": 1500}
    )
    assert not result.is_error, text_of(result)
    ctx = result.structured_content
    assert len(ctx["spans"]) == 1 and ctx["used_tokens"] <= 1500, ctx
    span = ctx["spans"][0]
    assert span["start_line"] <= first_line <= span["end_line"], (span["citation"], narrow)
    assert span["end_line"] > span["start_line"], "more than the one cited line"
    check_span(root, span, report)
    # Without a project: found in whichever project holds it.
    result = await client.call_tool("get_context", {"citation": cited["citation"]})
    assert not result.is_error, text_of(result)
    check_span(root, result.structured_content["spans"][0], report)
    # By chunk id.
    chunk_id = f"{cited['document_id']}:{cited['first_chunk']}"
    result = await client.call_tool("get_context", {"chunk_id": chunk_id, "max_tokens": 300})
    assert not result.is_error, text_of(result)
    check_span(root, result.structured_content["spans"][0], report)

    # list_projects.
    result = await client.call_tool("list_projects", {})
    assert not result.is_error, text_of(result)
    projects = result.structured_content["projects"]
    assert [p["name"] for p in projects] == ["demo"], projects
    assert projects[0]["documents"] == 2 and projects[0]["chunks"] >= 2, projects
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", projects[0]["indexed_at_utc"]), projects

    # Errors are tool errors with a message; the server keeps answering.
    # Over-long arguments are held to the query service's bounds, like a
    # gRPC request.
    errors = {}
    for label, name, args, expected in [
        ("unknown document", "get_context", {"citation": "src/Nope.java#L1-L5", "project": "demo"}, "Nope.java"),
        ("past the end", "get_context", {"citation": "src/Retry.java#L900-L901", "project": "demo"}, "past the end"),
        ("bad chunk id", "get_context", {"chunk_id": "zz:1"}, "not a document id"),
        ("zero budget", "search", {"query": "retry", "max_tokens": 0}, "max_tokens"),
        ("blank query", "search", {"query": "   "}, "query: is empty"),
        ("long query", "search", {"query": "retry " * 1000}, "query: is longer than 4096"),
        ("101 projects", "search", {"query": "retry", "projects": ["p"] * 101}, "projects: 101 values"),
        ("long citation", "get_context", {"citation": "a/" * 3000 + "b.java#L1-L2"}, "citation is 6012 bytes long"),
        # A mistyped project is named with the indexed ones (issue 38).
        (
            "unknown project",
            "search",
            {"query": "retry", "projects": ["demo", "nope"]},
            'search: projects: project "nope" is not indexed; indexed projects: demo',
        ),
        (
            "near-miss project",
            "get_context",
            {"citation": "src/Retry.java#L1-L5", "project": "dmeo"},
            'get_context: project: project "dmeo" is not indexed (did you mean "demo"?); indexed projects: demo',
        ),
    ]:
        result = await client.call_tool(name, args)
        assert result.is_error, (label, text_of(result))
        assert expected in text_of(result), (label, text_of(result))
        errors[label] = text_of(result)
    report["errors"] = errors
    result = await client.call_tool("list_projects", {})
    assert not result.is_error, "still serving after errors"


def keyed(url, key):
    """A streamable HTTP transport that sends `Authorization: Bearer KEY`."""
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    return streamable_http_client(url, http_client=http)


async def scoped(url, demo_key, other_key, demo_chunk, missing_chunk, report):
    """A key reads its own projects only; the demo key reads demo."""
    async with Client(keyed(url, other_key)) as client:
        result = await client.call_tool("list_projects", {})
        assert not result.is_error, text_of(result)
        assert result.structured_content["projects"] == [], result.structured_content
        result = await client.call_tool("search", {"query": "retry backoff"})
        assert not result.is_error, text_of(result)
        assert result.structured_content["spans"] == [], result.structured_content
        assert "Retry" not in text_of(result), text_of(result)
        # demo exists outside this key's scope, nope nowhere: the same
        # answer, listing only what the key may read (issue 38).
        for tool, args, field in [
            ("search", lambda p: {"query": "retry", "projects": [p]}, "projects"),
            ("get_context", lambda p: {"citation": "src/Retry.java#L1-L5", "project": p}, "project"),
        ]:
            answers = []
            for project in ("demo", "nope"):
                result = await client.call_tool(tool, args(project))
                assert result.is_error, text_of(result)
                answers.append(text_of(result).replace(f'"{project}"', '"X"'))
            expected = f'{tool}: {field}: project "X" is not indexed; indexed projects this caller may read: none'
            assert answers == [expected, expected], answers
        result = await client.call_tool("get_context", {"citation": "src/Retry.java#L1-L5"})
        assert result.is_error and "no indexed document" in text_of(result), text_of(result)
        # A chunk id of demo's and one nothing has: the same answer (issue 33).
        answers = []
        for chunk_id in (demo_chunk, missing_chunk):
            result = await client.call_tool("get_context", {"chunk_id": chunk_id})
            assert result.is_error, text_of(result)
            answers.append(text_of(result).replace(chunk_id, "ID"))
        assert answers[0] == answers[1], answers
        report["other_key"] = "sees nothing of demo"
    async with Client(keyed(url, demo_key)) as client:
        result = await client.call_tool("list_projects", {})
        assert [p["name"] for p in result.structured_content["projects"]] == ["demo"]
        result = await client.call_tool("search", {"query": "retry backoff"})
        assert not result.is_error, text_of(result)
        uris = {s["uri"] for s in result.structured_content["spans"]}
        assert "src/Retry.java" in uris, result.structured_content
        report["demo_key"] = sorted(uris)


async def indexing(url, root, reader_key, indexer_key, outside, escape, report):
    """Over HTTP, only a key with index = true indexes, only under the roots."""
    answers = {}
    async with Client(keyed(url, reader_key)) as client:
        result = await client.call_tool("index", {"source": root})
        assert result.is_error, text_of(result)
        answers["reader"] = text_of(result)
    async with Client(keyed(url, indexer_key)) as client:
        for name, source in [
            ("outside", outside),
            ("escape", escape),
            ("git", "http://127.0.0.1:9/org/repo.git"),
        ]:
            result = await client.call_tool("index", {"source": source})
            assert result.is_error, (name, text_of(result))
            answers[name] = text_of(result)
        result = await client.call_tool("index", {"source": root, "project": "notes"})
        assert not result.is_error, text_of(result)
        answers["inside"] = "indexed"
    report["answers"] = answers


async def main():
    transport, root, target = sys.argv[1], sys.argv[2], sys.argv[3]
    report = {"transport": transport, "citations_checked": []}
    if transport == "indexing":
        await indexing(target, root, *sys.argv[4:8], report)
    elif transport == "scoped":
        await scoped(target, sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7], report)
    elif transport == "stdio":
        env = {k: v for k, v in os.environ.items() if k in ("HOME", "PATH", "WEFT_DATA_DIR", "WEFT_MODEL_DIR", "WEFT_LOG")}
        params = StdioServerParameters(command=target, args=["mcp"], env=env)
        # The initialize handshake (protocol versions before 2026-07-28).
        async with Client(params, mode="legacy") as client:
            await session(client, root, report)
    else:
        # Discovery, falling back to initialize: whatever the server speaks.
        async with Client(target) as client:
            await session(client, root, report)
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main())
