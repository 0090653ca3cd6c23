"""Settings of the `webshop` env (section ``[env_gateway.webshop]``): the generated shop, the
goal-id partition, an optional remote AgentGym `agentenv_webshop` server, and `turnopd serve webshop`."""

from pydantic import Field

from services.settings_section import Section


class WebShopSettings(Section):
    catalogue_seed: int = Field(0, ge=0, description="Seed of the generated catalogue and its goals.")
    products: int = Field(3000, ge=30, le=200_000, description="Products in the generated catalogue.")
    goals_eval: int = Field(
        200, ge=1, le=1_000_000, description="N_eval: evaluation (valid_unseen) takes goal ids [0, N_eval)."
    )
    goals_train: int = Field(
        3000, ge=1, le=1_000_000, description="N_train: training takes goal ids [N_eval, N_eval + N_train)."
    )
    results_per_page: int = Field(10, ge=1, le=100, description="Products per results page.")
    max_results: int = Field(50, ge=1, le=1000, description="Search results kept (WebShop shows the top 50).")
    remote_url: str | None = Field(
        None,
        min_length=1,
        description="An AgentGym agentenv_webshop server to play on (unset: the generated local shop).",
    )
    remote_timeout_s: float = Field(
        30.0,
        gt=0.0,
        le=3600.0,
        description="Timeout of one call to the remote server (keep it under env_gateway.call_timeout_s).",
    )
    server_host: str = Field("127.0.0.1", min_length=1, description="`turnopd serve webshop` bind address.")
    server_port: int = Field(36001, ge=1, le=65535, description="`turnopd serve webshop` port.")
    server_max_envs: int = Field(
        1024, ge=1, le=100_000, description="`turnopd serve webshop`: open envs before /create answers 503."
    )
    server_env_ttl_s: float = Field(
        900.0,
        gt=0.0,
        le=86_400.0,
        description="`turnopd serve webshop`: an env unused this long expires (closed; its index answers 404).",
    )
    server_max_action_chars: int = Field(
        1024, ge=16, le=65_536, description="`turnopd serve webshop`: longest /step action (413 beyond)."
    )
    server_max_body_bytes: int = Field(
        65_536,
        ge=1024,
        le=1 << 31,
        description="`turnopd serve webshop`: largest request body in bytes, refused unread beyond (413).",
    )
