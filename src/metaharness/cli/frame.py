"""`metaharness frame seal|verify|render` — frame documents from the shell (docs/guides/frames.md).

Exit codes: 0 done; 2 a usage error or a refused document, the refusal's name and
the load-check detail on stderr in one sentence.
"""

from __future__ import annotations

import click

from metaharness.cli._out import fail, read_input, say, write_bytes
from metaharness.protocol.refusals import RefusalName


def _load(path: str):  # -> Frame
    from metaharness.protocol.frame import FrameRefusal, parse_frame_document

    try:
        data = read_input(path)
    except OSError as exc:
        refusal = FrameRefusal(RefusalName.FrameUnreadable, exc.strerror or str(exc))
        fail(f"{refusal.name}: {refusal.sentence(path)}")
    try:
        return parse_frame_document(data)
    except FrameRefusal as refusal:
        fail(f"{refusal.name}: {refusal.sentence(path)}")


@click.group()
def frame() -> None:
    """Seal, verify and render metaharness.frame/1 documents."""


@frame.command()
@click.argument("in_path", metavar="IN")
@click.option("-o", "--out", "out_path", metavar="OUT", help="Write the sealed document here instead of stdout.")
def seal(in_path: str, out_path: str | None) -> None:
    """Seal a frame object (format and digest optional) into its canonical document."""
    import msgspec

    from metaharness.protocol.frame import FrameRefusal, document_bytes, seal as seal_frame

    try:
        data = read_input(in_path)
    except OSError as exc:
        fail(f"{RefusalName.FrameUnreadable}: {FrameRefusal(RefusalName.FrameUnreadable, exc.strerror or str(exc)).seal_sentence(in_path)}")
    try:
        try:
            obj = msgspec.json.decode(data)
        except UnicodeDecodeError as exc:
            raise FrameRefusal(RefusalName.FrameInvalid, "not a JSON object: the document is not valid UTF-8") from None
        except (msgspec.DecodeError, RecursionError) as exc:
            raise FrameRefusal(RefusalName.FrameInvalid, f"not a JSON object: {exc}") from None
        sealed = seal_frame(obj)
    except FrameRefusal as refusal:
        fail(f"{refusal.name}: {refusal.seal_sentence(in_path)}")
    document = document_bytes(sealed)
    if out_path is None or out_path == "-":
        write_bytes(document)
        return
    try:
        with open(out_path, "wb") as fh:
            fh.write(document)
    except OSError as exc:
        fail(f"could not write {out_path}: {exc.strerror or exc}")


@frame.command()
@click.argument("path", metavar="FILE")
def verify(path: str) -> None:
    """Check a sealed document (every load check, in order) and print its digest."""
    say(_load(path).digest)


@frame.command()
@click.argument("path", metavar="FILE")
def render(path: str) -> None:
    """Print the frame's text for the model, byte for byte (no trailing newline)."""
    from metaharness.protocol.frame import render as render_frame

    write_bytes(render_frame(_load(path)).encode("utf-8"))
