"""The seed vocabulary of the generated shop: five WebShop-like categories, six product types each,
with the attributes, buying options and price range a product of each type can have.

Attribute phrases never contain "with" (instructions introduce options with it) and the option
values of one product type never repeat across its option names, so a value names one option.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class ProductType:
    """One kind of product: its search query (the type's name), category path, and pools."""

    name: str
    category: str
    path: tuple[str, ...]
    attributes: tuple[str, ...]
    options: tuple[tuple[str, tuple[str, ...]], ...]
    price: tuple[float, float]


def _phrases(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(";"))


# Option value pools ("; "-separated values).
_POOLS: dict[str, tuple[str, ...]] = {
    "apparel_colors": _phrases("black; white; navy blue; heather grey; burgundy; olive green; khaki; pink"),
    "apparel_sizes": _phrases("x-small; small; medium; large; x-large; xx-large"),
    "shoe_sizes": _phrases("us 6; us 7; us 8; us 9; us 10; us 11; us 12"),
    "scents": _phrases("lavender; citrus; vanilla; coconut; unscented; rose; eucalyptus"),
    "bottle_sizes": _phrases("2 ounce; 4 ounce; 8 fl oz; 16 fl oz; 32 fl oz"),
    "shades": _phrases("ruby red; nude pink; coral; berry; mauve; plum; peach"),
    "gadget_colors": _phrases("black; white; blue; red; silver; rose gold; green"),
    "cable_lengths": _phrases("3 ft; 6 ft; 10 ft; 15 ft"),
    "food_sizes": _phrases("1 pound; 2 pound; 12 count; 24 count; 6 pack"),
    "flavors": _phrases("sea salt; caramel; mint; vanilla; peanut butter; mixed berry; original; honey"),
    "wood_colors": _phrases("walnut; espresso; white; black; grey; natural; oak"),
    "denim_colors": _phrases("light wash; medium wash; dark wash; black; stone grey"),
    "polish_sizes": _phrases("0.5 fl oz; 0.25 fl oz"),
    "phone_models": _phrases("iphone 13; iphone 14; iphone 15; galaxy s22; galaxy s23; pixel 7"),
    "capacities": _phrases("5000mah; 10000mah; 20000mah; 26800mah"),
    "tea_flavors": _phrases("jasmine; mint; honey; lemon; original; ginger"),
    "tea_sizes": _phrases("20 count; 40 count; 100 count"),
    "coffee_flavors": _phrases("original; vanilla; caramel; hazelnut; mocha"),
    "coffee_sizes": _phrases("12 ounce; 1 pound; 2 pound; 5 pound"),
    "mix_flavors": _phrases("original; sea salt; honey; mixed berry; cranberry"),
    "oil_sizes": _phrases("16.9 fl oz; 25.4 fl oz; 33.8 fl oz; 101 fl oz"),
    "shelf_tiers": _phrases("3-tier; 4-tier; 5-tier"),
    "bed_sizes": _phrases("twin; full; queen; king"),
    "ottoman_sizes": _phrases("small; medium; large"),
}

# name, category path, options (name=pool ...), price range in dollars, attribute pool.
_TABLE: tuple[tuple[str, str, str, int, int, str], ...] = (
    # fashion
    (
        "t-shirt",
        "Clothing, Shoes & Jewelry › Clothing › T-Shirts",
        "color=apparel_colors size=apparel_sizes",
        8,
        35,
        "machine wash; short sleeve; long sleeve; slim fit; relaxed fit; cotton blend; crew neck; moisture wicking; v neck",
    ),
    (
        "hoodie",
        "Clothing, Shoes & Jewelry › Clothing › Hoodies & Sweatshirts",
        "color=apparel_colors size=apparel_sizes",
        20,
        60,
        "machine wash; fleece lined; zip up; pullover; relaxed fit; kangaroo pocket; drawstring closure; long sleeve",
    ),
    (
        "jeans",
        "Clothing, Shoes & Jewelry › Clothing › Jeans",
        "color=denim_colors size=apparel_sizes",
        25,
        80,
        "machine wash; high waist; slim fit; straight leg; button closure; stretch denim; classic fit; distressed",
    ),
    (
        "dress",
        "Clothing, Shoes & Jewelry › Clothing › Dresses",
        "color=apparel_colors size=apparel_sizes",
        18,
        70,
        "machine wash; short sleeve; high waist; floral print; elastic waist; midi length; wrap style; pockets",
    ),
    (
        "running shoes",
        "Clothing, Shoes & Jewelry › Shoes › Athletic Shoes",
        "color=apparel_colors size=shoe_sizes",
        30,
        120,
        "non slip; lace up; breathable mesh; lightweight; rubber sole; arch support; memory foam; wide width",
    ),
    (
        "rain jacket",
        "Clothing, Shoes & Jewelry › Clothing › Coats & Jackets",
        "color=apparel_colors size=apparel_sizes",
        30,
        110,
        "water resistant; hooded; packable; windproof; zip closure; lightweight; adjustable cuffs; machine wash",
    ),
    # beauty
    (
        "shampoo",
        "Beauty & Personal Care › Hair Care › Shampoos",
        "scent=scents size=bottle_sizes",
        6,
        30,
        "sulfate free; paraben free; cruelty free; natural ingredients; dry hair; color safe; anti dandruff; vegan",
    ),
    (
        "deodorant",
        "Beauty & Personal Care › Personal Care › Deodorants",
        "scent=scents",
        5,
        20,
        "aluminum free; long lasting; sensitive skin; cruelty free; natural ingredients; baking soda free; vegan; travel size",
    ),
    (
        "face moisturizer",
        "Beauty & Personal Care › Skin Care › Face Moisturizers",
        "size=bottle_sizes",
        10,
        55,
        "hyaluronic acid; fragrance free; oil free; sensitive skin; anti aging; spf 30; dry skin; paraben free",
    ),
    (
        "lipstick",
        "Beauty & Personal Care › Makeup › Lipsticks",
        "color=shades",
        6,
        30,
        "long lasting; matte finish; moisturizing; cruelty free; vegan; waterproof; highly pigmented; paraben free",
    ),
    (
        "nail polish",
        "Beauty & Personal Care › Makeup › Nail Polish",
        "color=shades size=polish_sizes",
        4,
        18,
        "quick drying; long lasting; chip resistant; high gloss; non toxic; vegan; cruelty free; gel effect",
    ),
    (
        "body lotion",
        "Beauty & Personal Care › Skin Care › Body Lotions",
        "scent=scents size=bottle_sizes",
        6,
        28,
        "shea butter; dry skin; fast absorbing; non greasy; fragrance free; natural ingredients; paraben free; sensitive skin",
    ),
    # electronics
    (
        "wireless earbuds",
        "Electronics › Headphones › Earbud Headphones",
        "color=gadget_colors",
        20,
        150,
        "noise cancelling; long battery life; water resistant; touch control; built in microphone; fast charging; bluetooth 5.3; deep bass",
    ),
    (
        "bluetooth speaker",
        "Electronics › Portable Audio › Bluetooth Speakers",
        "color=gadget_colors",
        20,
        130,
        "portable; water resistant; long battery life; deep bass; built in microphone; stereo pairing; outdoor; usb c charging",
    ),
    (
        "phone case",
        "Electronics › Cell Phone Accessories › Cases",
        "color=gadget_colors model=phone_models",
        8,
        35,
        "shockproof; slim fit; wireless charging compatible; clear back; raised edges; kickstand; anti scratch; military grade",
    ),
    (
        "usb c cable",
        "Electronics › Computer Accessories › USB Cables",
        "color=gadget_colors length=cable_lengths",
        6,
        25,
        "fast charging; braided nylon; high speed; data transfer; durable; tangle free; right angle; aluminum connector",
    ),
    (
        "power bank",
        "Electronics › Cell Phone Accessories › Portable Chargers",
        "color=gadget_colors capacity=capacities",
        15,
        70,
        "fast charging; dual usb ports; led display; portable; usb c input; slim design; wireless charging; travel friendly",
    ),
    (
        "hdmi cable",
        "Electronics › Computer Accessories › HDMI Cables",
        "length=cable_lengths",
        6,
        30,
        "4k resolution; high speed; braided nylon; gold plated; ethernet support; durable; hdr support; flexible",
    ),
    # food
    (
        "dark chocolate",
        "Grocery & Gourmet Food › Snack Foods › Chocolate",
        "flavor=flavors size=food_sizes",
        5,
        40,
        "gluten free; non gmo; sugar free; keto friendly; individually wrapped; fair trade; dairy free; usda organic",
    ),
    (
        "green tea",
        "Grocery & Gourmet Food › Beverages › Tea",
        "flavor=tea_flavors size=tea_sizes",
        4,
        30,
        "usda organic; caffeine free; non gmo; kosher certified; loose leaf; individually wrapped; sugar free; antioxidant rich",
    ),
    (
        "coffee beans",
        "Grocery & Gourmet Food › Beverages › Coffee",
        "flavor=coffee_flavors size=coffee_sizes",
        8,
        45,
        "whole bean; medium roast; dark roast; fair trade; usda organic; single origin; low acid; kosher certified",
    ),
    (
        "protein bars",
        "Grocery & Gourmet Food › Snack Foods › Nutrition Bars",
        "flavor=flavors size=food_sizes",
        10,
        45,
        "high protein; gluten free; low sugar; keto friendly; non gmo; individually wrapped; plant based; low calorie",
    ),
    (
        "trail mix",
        "Grocery & Gourmet Food › Snack Foods › Trail Mix",
        "flavor=mix_flavors size=food_sizes",
        6,
        35,
        "gluten free; non gmo; individually wrapped; high protein; no added sugar; resealable bag; kosher certified; roasted nuts",
    ),
    (
        "olive oil",
        "Grocery & Gourmet Food › Pantry Staples › Olive Oils",
        "size=oil_sizes",
        8,
        50,
        "extra virgin; cold pressed; usda organic; non gmo; single origin; glass bottle; kosher certified; first harvest",
    ),
    # furniture
    (
        "office chair",
        "Home & Kitchen › Furniture › Office Chairs",
        "color=wood_colors",
        60,
        300,
        "height adjustable; lumbar support; mesh back; easy assembly; swivel; padded armrests; faux leather; ergonomic",
    ),
    (
        "bookshelf",
        "Home & Kitchen › Furniture › Bookcases",
        "color=wood_colors style=shelf_tiers",
        40,
        200,
        "easy assembly; solid wood; engineered wood; space saving; living room; metal frame; industrial style; adjustable shelves",
    ),
    (
        "coffee table",
        "Home & Kitchen › Furniture › Coffee Tables",
        "color=wood_colors",
        50,
        250,
        "living room; storage shelf; solid wood; mid century; easy assembly; metal legs; lift top; round shape",
    ),
    (
        "bed frame",
        "Home & Kitchen › Furniture › Beds & Frames",
        "color=wood_colors size=bed_sizes",
        80,
        400,
        "metal frame; no box spring needed; under bed storage; easy assembly; noise free; upholstered headboard; solid wood; heavy duty",
    ),
    (
        "floor lamp",
        "Home & Kitchen › Lighting › Floor Lamps",
        "color=wood_colors",
        25,
        150,
        "dimmable; living room; energy saving; remote control; arc design; reading light; modern style; foot switch",
    ),
    (
        "storage ottoman",
        "Home & Kitchen › Furniture › Ottomans",
        "color=wood_colors size=ottoman_sizes",
        25,
        120,
        "faux leather; foldable; living room; storage space; padded seat; easy assembly; velvet fabric; bedroom",
    ),
)

_CATEGORY_OF_ROOT = {
    "Clothing, Shoes & Jewelry": "fashion",
    "Beauty & Personal Care": "beauty",
    "Electronics": "electronics",
    "Grocery & Gourmet Food": "food",
    "Home & Kitchen": "furniture",
}


def _product_type(name: str, path: str, options: str, low: int, high: int, attributes: str) -> ProductType:
    levels = tuple(level.strip() for level in path.split("›"))
    pools = tuple((option, _POOLS[pool]) for option, pool in (o.split("=") for o in options.split()))
    return ProductType(
        name, _CATEGORY_OF_ROOT[levels[0]], levels, _phrases(attributes), pools, (float(low), float(high))
    )


PRODUCT_TYPES: tuple[ProductType, ...] = tuple(_product_type(*row) for row in _TABLE)
CATEGORIES: tuple[str, ...] = ("beauty", "electronics", "fashion", "food", "furniture")

BRANDS: tuple[str, ...] = _phrases(
    "Norvik; Lumora; Belcrest; Auravale; Kestrel; Marlowe; Trelliant; Quenby; Solvane; Dunmore; Velora; Brixton; "
    "Castelle; Ember & Oak; Fenwick; Halcyon; Iverly; Juniper Co; Kairo; Larkspur; Meridia; Northbay; Orrin; "
    "Pellham; Quillon; Rowan; Sablewood; Tamsin; Umbra; Verity; Westwind; Yarrow; Zephyrine; Alder; Bramble; "
    "Cobalt Lane"
)
