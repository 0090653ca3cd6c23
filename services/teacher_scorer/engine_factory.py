"""Build the teacher's scoring engine by kind (``[teacher] engine``).

Apart from ``engine.py`` (the interface the engines implement), so that the interface imports no engine.
"""

from services.settings.teacher import TeacherSettings
from services.teacher_scorer.engine import TeacherEngine


def make_engine(settings: TeacherSettings) -> TeacherEngine:
    """Build the engine named by ``settings.engine``, loading ``settings.model``."""
    match settings.engine:
        case "transformers":
            from services.teacher_scorer.transformers_engine import TransformersEngine

            return TransformersEngine.from_settings(settings)
        case "vllm":
            from services.teacher_scorer.vllm_engine import VllmEngine

            return VllmEngine.from_settings(settings)
        case _:
            raise ValueError(f"unknown teacher engine {settings.engine!r}")
