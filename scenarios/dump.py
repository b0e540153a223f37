"""Write scenarios as YAML: readable (block scalars, documented key order) and stable."""

import yaml

from spillage.scenarios.model import Scenario


class Folded(str):
    """A long one-line text written as a folded block (`>-`), like `request` in the docs."""


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data) -> bool:
        return True


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


def _folded(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", str(value), style=">" if len(value) > 70 else None)


_Dumper.add_representer(str, _text)
_Dumper.add_representer(Folded, _folded)


def dump_yaml(document: dict) -> str:
    """The document as YAML: keys in the given order, block scalars for prompts, flow lists for
    forms, UTF-8 text; the same document always gives the same text."""
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100,
                     default_flow_style=None, indent=2)


def scenario_document(s: Scenario) -> dict:
    """The single-scenario form of `s`, as plain data in the documented field order."""
    success = {"category": s.success.category}
    if s.success.features:
        success["features"] = list(s.success.features)
    if s.success.max_price is not None:
        success["max_price"] = s.success.max_price
    if s.success.condition:
        success["condition"] = list(s.success.condition)
    document = {"id": s.id, **({"persona": s.persona} if s.persona != s.id else {}), "site": s.site,
                "style": s.style, "task": s.task, "request": Folded(s.request), "prompt": s.prompt,
                "sanitized_prompt": s.sanitized_prompt, "attributes": [], "success": success}
    for a in s.attributes:
        attribute = {"id": a.id, "text": a.text, "relevant": a.relevant, "class": a.cls}
        if a.guessed:
            attribute["guessed"] = True
        attribute.update({"match": list(a.match), "cues": list(a.cues), "concepts": list(a.concepts)})
        if a.look_alikes:
            attribute["look_alikes"] = list(a.look_alikes)
        document["attributes"].append(attribute)
    if s.derived:
        document["derived"] = sorted(s.derived)
    if s.source:
        document["source"] = s.source
    return document


def scenario_yaml(s: Scenario) -> str:
    """`s` as a single-scenario YAML file."""
    return dump_yaml(scenario_document(s))
