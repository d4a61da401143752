"""shopsim: a seeded shopping world with tools (search, view, buy) and reward components.

It plays the part of the real environment server: tasks come from a split file of the
same shape as ``persona_splits.v1.json`` and episodes are driven through the same tool
calls a real model would make.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from skilleval.records.env import StepResult
from skilleval.records.policy import ToolCall
from skilleval.storage.records import check_version, versioned

CATEGORY_NAMES = (
    "headphones", "backpack", "kettle", "monitor", "running shoes", "desk lamp", "blender",
    "tent", "office chair", "water bottle", "keyboard", "rain jacket", "coffee grinder",
    "yoga mat", "router", "camera bag", "sleeping bag", "toaster", "webcam", "umbrella",
    "air purifier", "bike light", "thermos", "power bank", "hiking boots", "speaker",
)  # fmt: skip
ATTRIBUTES = (
    "wireless", "waterproof", "foldable", "usb-c", "lightweight", "noise-cancelling",
    "stainless", "compact", "rechargeable", "ergonomic", "adjustable", "insulated",
    "quiet", "durable", "eco-friendly", "bluetooth",
)  # fmt: skip
PERSONAS = (
    "a student", "a nurse on night shifts", "a retired teacher", "a commuter",
    "a new parent", "a trail runner", "a software developer", "a small cafe owner",
)  # fmt: skip
SEARCH_LIMIT = 20
REWARD_KEYS = ("reward", "r_strict", "r_success", "r_category", "r_budget", "r_attrs")


@dataclass(frozen=True)
class Product:
    product_id: str
    category: str
    name: str
    price: float
    attributes: tuple[str, ...]
    popularity: float

    def as_listing(self) -> dict[str, Any]:
        return {"id": self.product_id, "name": self.name, "price": self.price}

    def as_detail(self) -> dict[str, Any]:
        return {**self.as_listing(), "category": self.category, "attributes": list(self.attributes)}


@dataclass(frozen=True)
class Task:
    task_id: str
    persona: str
    category: str
    budget: float
    required_attributes: tuple[str, ...]

    @property
    def instruction(self) -> str:
        features = ", ".join(self.required_attributes)
        return (
            f"You are shopping for {self.persona}. Buy exactly one {self.category} that costs "
            f"at most ${self.budget:.2f} and has all of these features: {features}."
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "persona": self.persona,
            "category": self.category,
            "budget": self.budget,
            "required_attributes": list(self.required_attributes),
            "instruction": self.instruction,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Task:
        return cls(
            task_id=data["task_id"],
            persona=data["persona"],
            category=data["category"],
            budget=float(data["budget"]),
            required_attributes=tuple(data["required_attributes"]),
        )


def generate_catalogue(
    rng: np.random.Generator, n_categories: int, per_category: int
) -> list[Product]:
    products = []
    for c, category in enumerate(CATEGORY_NAMES[:n_categories]):
        pool = rng.choice(len(ATTRIBUTES), size=8, replace=False)
        base_price = float(rng.uniform(20, 300))
        for i in range(per_category):
            n_attrs = int(rng.integers(2, 6))
            attrs = tuple(sorted(ATTRIBUTES[j] for j in rng.choice(pool, n_attrs, replace=False)))
            price = round(base_price * float(rng.lognormal(0.0, 0.35)), 2)
            products.append(
                Product(
                    product_id=f"p{c:02d}-{i:03d}",
                    category=category,
                    name=f"{attrs[0].title()} {category} {i:03d}",
                    price=price,
                    attributes=attrs,
                    popularity=float(rng.random()),
                )
            )
    return products


def generate_tasks(
    rng: np.random.Generator, catalogue: list[Product], n_tasks: int, prefix: str
) -> list[Task]:
    """Persona tasks that are always solvable: some product meets category, budget and features."""
    by_category: dict[str, list[Product]] = {}
    for product in catalogue:
        by_category.setdefault(product.category, []).append(product)
    categories = sorted(by_category)
    tasks: list[Task] = []
    while len(tasks) < n_tasks:
        category = categories[int(rng.integers(len(categories)))]
        target = by_category[category][int(rng.integers(len(by_category[category])))]
        n_required = int(rng.integers(1, min(3, len(target.attributes)) + 1))
        required = tuple(sorted(rng.choice(target.attributes, n_required, replace=False)))
        budget = round(target.price * float(rng.uniform(1.0, 1.25)), 2)
        tasks.append(
            Task(
                task_id=f"{prefix}-{len(tasks):04d}",
                persona=PERSONAS[int(rng.integers(len(PERSONAS)))],
                category=category,
                budget=budget,
                required_attributes=tuple(str(a) for a in required),
            )
        )
    return tasks


TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": f"Search the catalogue by category; returns up to {SEARCH_LIMIT} "
            "products by popularity.",
            "parameters": {
                "type": "object",
                "properties": {
                    "category": {"type": "string"},
                    "max_price": {"type": ["number", "null"]},
                },
                "required": ["category"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "view",
            "description": "Show a product's price, category and attributes.",
            "parameters": {
                "type": "object",
                "properties": {"product_id": {"type": "string"}},
                "required": ["product_id"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "buy",
            "description": "Buy a product; ends the episode.",
            "parameters": {
                "type": "object",
                "properties": {"product_id": {"type": "string"}},
                "required": ["product_id"],
            },
        },
    },
]


def score_purchase(task: Task, product: Product | None) -> dict[str, float]:
    if product is None:
        return dict.fromkeys(REWARD_KEYS, 0.0)
    components = {
        "r_category": float(product.category == task.category),
        "r_budget": float(product.price <= task.budget),
        "r_attrs": sum(a in product.attributes for a in task.required_attributes)
        / len(task.required_attributes),
    }
    # Strict: a wrong category or a blown budget is worth nothing; features count by fraction.
    strict = components["r_category"] * components["r_budget"] * components["r_attrs"]
    success = float(all(v == 1.0 for v in components.values()))
    return {"reward": strict, "r_strict": strict, "r_success": success, **components}


@dataclass
class ShopEpisode:
    task: Task
    world: ShopWorld
    purchase: Product | None = None
    done: bool = False

    @property
    def instruction(self) -> str:
        return self.task.instruction

    def step(self, call: ToolCall) -> StepResult:
        if self.done:
            return StepResult(json.dumps({"error": "episode already ended"}), True)
        handler = {"search": self._search, "view": self._view, "buy": self._buy}.get(call.name)
        if handler is None:
            return StepResult(json.dumps({"error": f"unknown tool {call.name}"}), False)
        return handler(call.arguments)

    def _search(self, args: dict[str, Any]) -> StepResult:
        category = str(args.get("category", "")).strip().lower()
        max_price = args.get("max_price")
        hits = [
            p
            for p in self.world.by_category.get(category, [])
            if max_price is None or p.price <= float(max_price)
        ]
        return StepResult(json.dumps([p.as_listing() for p in hits[:SEARCH_LIMIT]]), False)

    def _view(self, args: dict[str, Any]) -> StepResult:
        product = self.world.products.get(str(args.get("product_id")))
        if product is None:
            return StepResult(json.dumps({"error": "no such product"}), False)
        return StepResult(json.dumps(product.as_detail()), False)

    def _buy(self, args: dict[str, Any]) -> StepResult:
        product = self.world.products.get(str(args.get("product_id")))
        if product is None:
            return StepResult(json.dumps({"error": "no such product"}), False)
        self.purchase, self.done = product, True
        return StepResult(json.dumps({"status": "ordered", "id": product.product_id}), True)

    def rewards(self) -> dict[str, float]:
        return score_purchase(self.task, self.purchase)

    def close(self) -> None:
        self.done = True


class ShopWorld:
    """In-process environment backend over a catalogue and a task list."""

    def __init__(self, catalogue: list[Product], tasks: list[Task]) -> None:
        self.products = {p.product_id: p for p in catalogue}
        self.by_category: dict[str, list[Product]] = {}
        for product in sorted(catalogue, key=lambda p: -p.popularity):
            self.by_category.setdefault(product.category, []).append(product)
        self.tasks = {t.task_id: t for t in tasks}

    def tools(self) -> list[dict[str, Any]]:
        return TOOLS

    def start(self, task_id: str) -> ShopEpisode:
        return ShopEpisode(task=self.tasks[task_id], world=self)


def catalogue_to_json(catalogue: list[Product]) -> dict[str, Any]:
    products = [{**p.as_detail(), "popularity": p.popularity} for p in catalogue]
    return versioned("world_catalogue", {"products": products})


def catalogue_from_json(data: dict[str, Any], source: str) -> list[Product]:
    check_version("world_catalogue", data, source)
    return [
        Product(
            product_id=d["id"],
            category=d["category"],
            name=d["name"],
            price=float(d["price"]),
            attributes=tuple(d["attributes"]),
            popularity=float(d["popularity"]),
        )
        for d in data["products"]
    ]
