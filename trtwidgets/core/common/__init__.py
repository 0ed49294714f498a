"""The small common part: user-facing errors, atomic writes and the write rule, frozen values."""
