"""The install key: made once (0600), and a key file that cannot be used is a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from emceepee_cli import seal


@pytest.mark.parametrize(
    ("content", "why"),
    [("not hex at all", "non-hexadecimal"), ("abcd", "2 bytes, not 32"), ("", "0 bytes, not 32")],
)
def test_a_key_file_that_is_not_a_key_is_refused_with_what_to_do(
    tmp_path: Path, content: str, why: str
) -> None:
    (tmp_path / seal.KEY_FILE).write_text(content)
    with pytest.raises(seal.InstallKeyError) as refused:
        seal.install_key(tmp_path)
    assert why in refused.value.message and "Delete it" in str(refused.value.hint)
    assert (tmp_path / seal.KEY_FILE).read_text() == content  # left as it was: the user decides


def test_a_key_where_no_folder_can_be_made_is_refused(tmp_path: Path) -> None:
    (tmp_path / "data").write_text("a file, not a folder")
    with pytest.raises(seal.InstallKeyError):
        seal.install_key(tmp_path / "data" / "inner")
