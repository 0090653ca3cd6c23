"""Bounded exponential backoff shared by the teacher clients."""

from dataclasses import dataclass

from services.settings.teacher import TeacherSettings


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 6
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0

    @classmethod
    def from_settings(cls, settings: TeacherSettings) -> "RetryPolicy":
        return cls(settings.client_max_attempts, settings.client_backoff_s, settings.client_max_backoff_s)

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based): backoff_s * 2^(attempt-1), capped."""
        return float(min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1)))

    def total_wait(self) -> float:
        """Longest time a call spends waiting between its attempts."""
        return sum(self.delay(a) for a in range(1, self.max_attempts))
