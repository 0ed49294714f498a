"""The bundled demo's feeds: whole batches only, and a clear error for a batch size below 1."""

from __future__ import annotations

import pytest

from trtwidgets import demo
from trtwidgets.core.common.errors import UserError


def test_sample_inputs_are_whole_batches():
    feeds = demo.sample_inputs(batch_size=5)
    assert feeds and all(f[demo.INPUT_NAME].shape[0] == 5 for f in feeds)


@pytest.mark.parametrize("batch", [0, -3])
def test_a_batch_size_below_one_is_a_user_error(batch):
    with pytest.raises(UserError, match="not a batch size"):
        demo.sample_inputs(batch_size=batch)
