"""pytest set-up for the analysis tests: the synthetic fixture tree (tests only) and the committed sample data."""

import glob
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "analysis"))
sys.path.insert(0, HERE)

import fixtures  # noqa: E402

SAMPLE_DIR = os.path.join(REPO, "data", "sample")


@pytest.fixture(scope="session")
def repo():
    return REPO


@pytest.fixture(scope="session")
def fixture_dir(tmp_path_factory):
    return fixtures.write_all(str(tmp_path_factory.mktemp("fixture_data")))


def sample_has_steps():
    return bool(glob.glob(os.path.join(SAMPLE_DIR, "**", "*.csv"), recursive=True))


@pytest.fixture(scope="session")
def sample_dir():
    if not sample_has_steps():
        pytest.skip("data/sample/ holds no CSV yet (it needs a real CPU run of lins step)")
    return SAMPLE_DIR
