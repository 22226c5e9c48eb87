"""A Griffe extension for the API reference (mkdocs.yml loads it; MkDocs does not publish this file).

floodmark's docstrings are Sphinx/reST style; mkdocstrings renders them as Markdown with Griffe's Sphinx
parser. Three reST habits of the docstrings would otherwise show up literally on the site:

* cross-reference roles (``:class:`~floodmark.spark.SourceTime```, ``:meth:`on_event```): each becomes a
  link when the target is documented on the site (an optional autorefs reference: no warning when it is
  not) and inline code otherwise; ``~`` shows the last name only, as in Sphinx;
* several fields on one line (``:arg window: ... :arg aggregate: ...``): each field starts its own line, so
  the parser sees all of them;
* a paragraph ending in ``::`` before a literal block: one ``:`` (the block is indented, so Markdown shows
  it as code anyway).

Only the docstrings' text as the site shows it changes; the source files are not touched.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|mod|data|attr|exc|obj|const):`(?P<target>[^`]+)`")
_FIELD = re.compile(
    r"(?<=\S)[ \t]+(?=:(?:arg|argument|param|parameter|key|keyword|kwarg|ivar|var|cvar|raises?|except|exception"
    r"|returns?|rtype|type|vartype)\b[^:\n]*:)"
)
_LITERAL = re.compile(r"(?<=\S)::[ \t]*$", re.MULTILINE)
_UNRESOLVED = (KeyError, ValueError, griffe.NameResolutionError, griffe.AliasResolutionError, griffe.CyclicAliasError)


class SphinxRoles(griffe.Extension):
    """Rewrite reST roles, inline fields and ``::`` in every docstring (see the module docstring)."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        _rewrite(pkg, loader)  # the package's own docstring; on_object sees its members

    def on_object(self, *, obj: griffe.Object, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        _rewrite(obj, loader)  # Griffe calls this once the whole package is loaded: names in other modules resolve


def _rewrite(obj: griffe.Object, loader: griffe.GriffeLoader) -> None:
    docstring = obj.docstring
    if docstring is None:
        return
    text = _FIELD.sub("\n", docstring.value)
    text = _LITERAL.sub(":", text)
    docstring.value = _ROLE.sub(lambda match: _reference(obj, loader, match["target"]), text)


def _reference(obj: griffe.Object, loader: griffe.GriffeLoader, target: str) -> str:
    short = target.startswith("~")
    name = target.lstrip("~").strip()
    shown = name.lstrip(".").rsplit(".", 1)[-1] if short else name.lstrip(".")
    shown = shown.removesuffix("()")
    path = _resolve(obj, loader, name.removesuffix("()"))
    if path is None:
        return f"`{shown}`"
    return f'<autoref identifier="{path}" optional><code>{shown}</code></autoref>'


def _resolve(obj: griffe.Object, loader: griffe.GriffeLoader, name: str) -> str | None:
    """The path of the object ``name`` refers to from ``obj``'s docstring, if Griffe knows it."""
    candidates = []
    if name.startswith("."):  # relative to the package (``:mod:`.controller```)
        package = obj if obj.is_module else obj.module
        candidates.append(f"{package.path}{name}")
        candidates.append(f"{package.parent.path}{name}" if package.parent is not None else name.lstrip("."))
    else:
        candidates.append(name)
        head, _, rest = name.partition(".")
        try:
            resolved = obj.resolve(head)
        except _UNRESOLVED:  # a name Griffe cannot place is shown as code
            resolved = None
        if resolved:
            candidates.append(f"{resolved}.{rest}" if rest else resolved)
    for candidate in candidates:
        found = _lookup(loader, candidate)
        if found is not None:
            return found
    return None


def _lookup(loader: griffe.GriffeLoader, path: str) -> str | None:
    try:
        found = loader.modules_collection[path]
    except _UNRESOLVED:  # not loaded (another package) or no such member
        return None
    try:
        return found.final_target.path if found.is_alias else found.path
    except _UNRESOLVED:  # an alias that does not resolve
        return None
