"""The report as one self-contained HTML page: headings, tables and PNGs embedded as base64 (pure)."""

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass

from services.experiments.tables import Table

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
thead { background: #f0f0f5; }
figure { margin: 1em 0; }
img { max-width: 100%; border: 1px solid #eee; }
figcaption, .note { color: #555; font-size: 0.85em; }
section { border-top: 1px solid #ddd; margin-top: 1.5em; }
"""


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Image:
    file_name: str
    png: bytes
    caption: str


Block = Heading | Paragraph | Image | Table


def render_block(block: Block) -> str:
    match block:
        case Heading(text=text, level=level):
            return f"<h{level}>{html.escape(text)}</h{level}>"
        case Paragraph(text=text):
            return f"<p>{html.escape(text)}</p>"
        case Image(file_name=name, png=png, caption=caption):
            data = base64.b64encode(png).decode("ascii")
            return (
                f"<figure><img src='data:image/png;base64,{data}' alt='{html.escape(name)}'>"
                f"<figcaption>{html.escape(caption)} ({html.escape(name)})</figcaption></figure>"
            )
        case Table():
            return block.html()
        case _:
            raise ValueError(f"unknown report block {block!r}")


def render_page(title: str, blocks: Sequence[Block]) -> str:
    body = "\n".join(render_block(b) for b in blocks)
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>"
        f"<body><h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n"
    )
