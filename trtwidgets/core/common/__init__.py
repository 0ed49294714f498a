"""The small common part: user-facing errors, atomic writes, frozen values."""
