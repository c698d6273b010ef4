"""The page's static checks: its policy matches its inline blocks, and no HTML sinks in its JS."""

from __future__ import annotations

import base64
import hashlib
import re

from streams.dashboard import page, table_page


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_the_policy_allows_exactly_the_inline_scripts_and_styles() -> None:
    html = page.HTML.decode()
    scripts = re.findall(r"<script>(.*?)</script>", html, re.S)
    styles = re.findall(r"<style>(.*?)</style>", html, re.S)
    assert scripts == [table_page.SCRIPT, page.SCRIPT]  # the table's lets first
    assert styles == [page.STYLE, table_page.STYLE]
    assert f"script-src {' '.join(map(_hash, scripts))};" in page.CONTENT_SECURITY_POLICY
    assert f"style-src {' '.join(map(_hash, styles))};" in page.CONTENT_SECURITY_POLICY


def test_the_script_never_writes_html() -> None:
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in page.SCRIPT + table_page.SCRIPT, sink


def test_no_resource_comes_from_elsewhere() -> None:
    html = page.HTML.decode()
    assert not re.search(r"(src|href)=\"(https?:)?//", html)
    assert "style=" not in html  # inline style attributes would break the policy
