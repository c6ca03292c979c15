"""Event templates for the sandbox: what ``publish TYPE`` sends, as data.

A template names an event type, its ``data`` object, and optionally which data field is the
business key (``renewal_id`` for a renewal reminder). String values may contain ``{n}``, replaced
by the publish counter, so ``"ren_{n}"`` gives ``ren_1``, ``ren_2`` … A template file
(``--template FILE``) is JSON::

    {
      "default": "renewal.reminder",
      "templates": {
        "renewal.reminder": {"business_key": "renewal_id",
                             "data": {"renewal_id": "ren_{n}", "plan": "pro"}},
        "invoice.paid": {"business_key": "invoice_id", "data": {"invoice_id": "in_{n}"}}
      }
    }

Its templates are added to (and may replace) the built-in ones; ``default`` picks what a bare
``publish`` sends. A malformed file is one :class:`~sender_sim.exceptions.ConfigurationError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from receiver.commands.files import read_json
from sender_sim.exceptions import ConfigurationError

__all__ = ["BUILT_IN", "Template", "TemplateSet", "load_templates"]


@dataclass(frozen=True)
class Template:
    """One event type's payload template."""

    event_type: str
    data: Mapping[str, Any] = field(default_factory=dict)
    business_key: str | None = None
    """The data field whose value is the business key."""

    def render(self, n: int, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The data object for publish number ``n`` with ``overrides`` applied."""
        rendered = {key: _fill(value, n) for key, value in self.data.items()}
        rendered.update(overrides or {})
        return rendered

    def key_of(self, data: Mapping[str, Any]) -> str | None:
        if self.business_key is None:
            return None
        value = data.get(self.business_key)
        return None if value is None else str(value)


def _fill(value: Any, n: int) -> Any:
    if isinstance(value, str):
        return value.replace("{n}", str(n))
    if isinstance(value, dict):
        return {k: _fill(v, n) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, n) for v in value]
    return value


BUILT_IN: tuple[Template, ...] = (
    Template(
        "renewal.reminder",
        {"renewal_id": "ren_{n}", "customer_id": "cus_{n}", "renews_at": "2026-09-01T00:00:00Z"},
        "renewal_id",
    ),
    Template(
        "invoice.paid",
        {"invoice_id": "in_{n}", "amount": 1999, "currency": "eur"},
        "invoice_id",
    ),
    Template("hookproof.test", {"sequence": "{n}"}),
    Template("hookproof.demo.unavailable", {"renewal_id": "ren_u{n}"}, "renewal_id"),
    Template("hookproof.demo.gone", {"renewal_id": "ren_g{n}"}, "renewal_id"),
)
"""Always available. The two ``hookproof.demo.*`` types make the reference receiver
(``hookproof receiver``) answer 503 and 410, to watch retries and dead letters."""


@dataclass(frozen=True)
class TemplateSet:
    """Templates by event type, and the one a bare ``publish`` uses."""

    templates: Mapping[str, Template]
    default: str

    def __post_init__(self) -> None:
        if self.default not in self.templates:
            raise ConfigurationError(f"the default template {self.default!r} is not defined")

    def get(self, event_type: str | None) -> Template:
        """The template for ``event_type`` (the default when ``None``); an unknown type gets an
        empty template, so any type can be published."""
        name = event_type or self.default
        return self.templates.get(name) or Template(name)

    def names(self) -> list[str]:
        return sorted(self.templates)


def _template(name: str, spec: object, source: str) -> Template:
    if not isinstance(spec, dict):
        raise ConfigurationError(f"{source}: template {name!r} must be a JSON object")
    data = spec.get("data", {})
    key = spec.get("business_key")
    if not isinstance(data, dict):
        raise ConfigurationError(f"{source}: the data of template {name!r} must be an object")
    if key is not None and not isinstance(key, str):
        raise ConfigurationError(f"{source}: business_key of {name!r} must name a data field")
    unknown = set(spec) - {"data", "business_key"}
    if unknown:
        raise ConfigurationError(
            f"{source}: template {name!r} has unknown keys {', '.join(sorted(unknown))}"
        )
    return Template(name, data, key)


def load_templates(path: str | None = None) -> TemplateSet:
    """The built-in templates, plus those of the JSON file at ``path`` when given."""
    templates = {t.event_type: t for t in BUILT_IN}
    default = "renewal.reminder"
    if path is None:
        return TemplateSet(templates, default)
    document = read_json(path, "--template", ConfigurationError)
    if not isinstance(document, dict) or not isinstance(document.get("templates"), dict):
        raise ConfigurationError(f"--template {path} must be an object with a 'templates' object")
    for name, spec in document["templates"].items():
        if not name.strip():
            raise ConfigurationError(f"--template {path}: an event type must not be empty")
        templates[name] = _template(name, spec, f"--template {path}")
    chosen = document.get("default", default)
    if not isinstance(chosen, str) or chosen not in templates:
        raise ConfigurationError(f"--template {path}: default {chosen!r} is not a template")
    return TemplateSet(templates, chosen)
