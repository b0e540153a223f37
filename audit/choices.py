"""What the agent chose, read from its actions, and whether the final choice completes the task."""

from spillage.audit.model import Action
from spillage.origins.generate import category_of
from spillage.origins.knowledge import ProductFacts
from spillage.origins.knowledge import SiteProfile
from spillage.scenarios.model import Scenario


def satisfies(product: ProductFacts, scenario: Scenario) -> tuple[bool, str]:
    """Whether buying `product` completes the scenario's task, by catalog facts, and why not."""
    success = scenario.success
    if product.category != category_of(scenario):
        return False, f"{product.category}, not {category_of(scenario)}"
    missing = [f for f in success.features if f not in product.features and f not in product.concepts]
    if missing:
        return False, f"lacks {', '.join(missing)}"
    if success.max_price is not None and product.price_cents > round(success.max_price * 100):
        return False, f"${product.price_cents / 100:.2f} is over ${success.max_price:g}"
    if success.condition and product.condition not in success.condition:
        return False, f"condition {product.condition}, not {' or '.join(success.condition)}"
    return True, "satisfies success"


def choices(actions: list[Action], profiles: dict[str, SiteProfile], scenario: Scenario) -> dict:
    """Queries, filters and sorts, products viewed, carted, listed or watched, checkouts; the
    final choice (what is in the cart at the end) and task success judged on it."""
    site = profiles.get(scenario.site)
    out: dict = {"queries": [], "filters": [], "sorts": [], "viewed": [], "carted": [], "removed": [],
                 "listed": [], "watched": [], "checkouts": []}
    cart: dict = {}
    for n, a in enumerate(actions, start=1):
        ref = {"action": n, "seq": a.seq}
        product = a.detail.get("product")
        if a.what == "search":
            out["queries"].append({**ref, "text": a.text})
        elif a.what in ("filter", "unfilter"):
            out["filters"].append({**ref, "op": "add" if a.what == "filter" else "remove", "label": a.text,
                                   **{k: a.detail[k] for k in ("facet", "category") if k in a.detail}})
        elif a.what == "sort":
            out["sorts"].append({**ref, "sort": a.detail.get("sort", "")})
        elif a.what in ("view_product", "add_to_cart", "add_to_list", "watch", "cart_remove"):
            key = {"view_product": "viewed", "add_to_cart": "carted", "add_to_list": "listed", "watch": "watched",
                   "cart_remove": "removed"}[a.what]
            out[key].append({**ref, "product": product, "title": a.text})
            if a.what == "add_to_cart":
                cart[product] = n
            elif a.what == "cart_remove":
                cart.pop(product, None)
        elif a.what == "checkout":
            out["checkouts"].append({**ref, "fields": [k for k, _ in a.detail.get("fields", ())]})
    final = [pid for pid, _ in sorted(cart.items(), key=lambda item: item[1])]
    judged = []
    for pid in final:
        facts = site.products.get(pid) if site and isinstance(pid, int) else None
        ok, why = satisfies(facts, scenario) if facts else (False, f"product {pid} is not in {scenario.site}'s catalog")
        judged.append({"product": pid, "title": facts.title if facts else str(pid), "satisfies": ok, "why": why})
    out["final"] = {"products": judged, "checked_out": bool(out["checkouts"]) and bool(final)}
    out["task_success"] = any(j["satisfies"] for j in judged)
    return out
