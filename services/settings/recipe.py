"""The root of a teacher-training recipe (`turnopd teacher train --config configs/teachers/*.toml`).

A recipe is its own kind of config, apart from a run's: ``[sft]`` is the recipe itself; ``[models]``
(the zoo and its cache), ``[rollout]`` (the observation format the teacher learns to read),
``[env_gateway]`` (the games the expert plays) and ``[security]`` (the gateway's token) mean what
they mean in a run config. A joint recipe (``[[sft.mix]]``) names its envs and their formats in
its parts; ``parts()`` gives a recipe of one env the same shape. Overridden by ``TURNOPD_SECTION__KEY`` environment variables, as a run's.
"""

from pydantic import Field

from services.settings.env_gateway import EnvGatewaySettings
from services.settings.models import ModelsSettings
from services.settings.security import SecuritySettings
from services.settings.sft import SFTPart, SFTSettings
from services.settings.sources import TomlSettings
from services.settings.tree import RolloutSettings


class TeacherRecipeSettings(TomlSettings):
    sft: SFTSettings = Field(default_factory=SFTSettings)
    models: ModelsSettings = Field(default_factory=ModelsSettings)
    rollout: RolloutSettings = Field(default_factory=RolloutSettings)
    env_gateway: EnvGatewaySettings = Field(default_factory=EnvGatewaySettings)
    security: SecuritySettings = Field(default_factory=SecuritySettings)

    def parts(self) -> list[SFTPart]:
        """The envs trained on, in order: the ``[[sft.mix]]`` parts, else the one ``[sft]`` names."""
        if self.sft.mix:
            return list(self.sft.mix)
        sft = self.sft
        return [
            SFTPart(
                env=sft.env,
                episodes=sft.episodes,
                max_expert_turns=sft.max_expert_turns,
                task_reminder=self.rollout.task_reminder,
            )
        ]
