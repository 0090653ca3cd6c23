"""The generated product catalogue: a few thousand products, deterministic from a seed.

Each product has a type (WebShop's search ``query``), a category path, a title naming its
attributes, buying options with their values, a price, a description and feature bullets.
Pure module: standard library only.
"""

import json
import random
from dataclasses import dataclass
from functools import cached_property

from services.envs.webshop.vocabulary import BRANDS, PRODUCT_TYPES
from services.errors import ConfigError

CATALOGUE_FORMAT = 1
_ASIN_CHARS = "0123456789ABCDEFGHJKLMNPQRSTUVWXYZ"


@dataclass(frozen=True)
class Product:
    asin: str
    product_type: str
    category: str
    path: tuple[str, ...]
    brand: str
    title: str
    attributes: tuple[str, ...]
    options: tuple[tuple[str, tuple[str, ...]], ...]
    price: float
    description: str
    features: tuple[str, ...]

    @property
    def option_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.options)

    def option_values(self, name: str) -> tuple[str, ...]:
        return next((values for n, values in self.options if n == name), ())

    def to_json(self) -> dict[str, object]:
        return {
            "asin": self.asin,
            "product_type": self.product_type,
            "category": self.category,
            "path": list(self.path),
            "brand": self.brand,
            "title": self.title,
            "attributes": list(self.attributes),
            "options": [[name, list(values)] for name, values in self.options],
            "price": self.price,
            "description": self.description,
            "features": list(self.features),
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> "Product":
        options = data["options"]
        assert isinstance(options, list)
        return cls(
            asin=str(data["asin"]),
            product_type=str(data["product_type"]),
            category=str(data["category"]),
            path=tuple(_strings(data["path"])),
            brand=str(data["brand"]),
            title=str(data["title"]),
            attributes=tuple(_strings(data["attributes"])),
            options=tuple((str(name), tuple(_strings(values))) for name, values in options),
            price=float(str(data["price"])),
            description=str(data["description"]),
            features=tuple(_strings(data["features"])),
        )


def _strings(value: object) -> list[str]:
    if not isinstance(value, list):
        raise ConfigError(f"catalogue field is not a list: {value!r}")
    return [str(v) for v in value]


class Catalogue:
    """The products, in generation order, and their index by ASIN."""

    def __init__(self, seed: int, products: list[Product]) -> None:
        self.seed = seed
        self.products = products

    @cached_property
    def by_asin(self) -> dict[str, Product]:
        return {p.asin: p for p in self.products}

    def __len__(self) -> int:
        return len(self.products)

    def to_json(self) -> str:
        body = {
            "format": CATALOGUE_FORMAT,
            "seed": self.seed,
            "products": [p.to_json() for p in self.products],
        }
        return json.dumps(body, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> "Catalogue":
        data = json.loads(text)
        if data.get("format") != CATALOGUE_FORMAT:
            raise ConfigError(f"catalogue format {data.get('format')!r}, expected {CATALOGUE_FORMAT}")
        return cls(int(data["seed"]), [Product.from_json(p) for p in data["products"]])


def generate_catalogue(seed: int, count: int) -> Catalogue:
    """``count`` products, the types taken in turn; the same seed gives the same catalogue."""
    if count < len(PRODUCT_TYPES):
        raise ConfigError(f"a catalogue needs at least {len(PRODUCT_TYPES)} products, got {count}")
    rng = random.Random(f"webshop-catalogue:{seed}")
    asins: set[str] = set()
    products = []
    for index in range(count):
        kind = PRODUCT_TYPES[index % len(PRODUCT_TYPES)]
        asin = _new_asin(rng, asins)
        brand = rng.choice(BRANDS)
        attributes = tuple(rng.sample(kind.attributes, rng.choice((2, 3, 3, 4))))
        options = tuple((name, _some_values(rng, pool)) for name, pool in kind.options)
        dollars = rng.randint(int(kind.price[0]), int(kind.price[1]))
        title = f"{brand} {kind.name.title()} - {', '.join(a.title() for a in attributes)}"
        choices = " and ".join(f"{len(values)} {name}s" for name, values in options)
        description = f"The {brand} {kind.name}: {', '.join(attributes)}. Available in {choices}."
        features = (*(a.capitalize() for a in attributes), f"Sold by the {brand} store")
        products.append(
            Product(
                asin=asin,
                product_type=kind.name,
                category=kind.category,
                path=kind.path,
                brand=brand,
                title=title,
                attributes=attributes,
                options=options,
                price=round(dollars - 0.01, 2),
                description=description,
                features=features,
            )
        )
    return Catalogue(seed, products)


def _some_values(rng: random.Random, pool: tuple[str, ...]) -> tuple[str, ...]:
    """2 to 5 values of an option, in the pool's order."""
    chosen = set(rng.sample(pool, rng.randint(2, min(5, len(pool)))))
    return tuple(v for v in pool if v in chosen)


def _new_asin(rng: random.Random, taken: set[str]) -> str:
    while True:
        asin = "B0" + "".join(rng.choice(_ASIN_CHARS) for _ in range(8))
        if asin not in taken:
            taken.add(asin)
            return asin
