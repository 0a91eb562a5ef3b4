"""pytest set-up for the analysis tests: the synthetic fixture tree (tests only) and the committed sample data.

lins_analysis and lins_schema are imported as installed (scripts/install-deps.sh) or through PYTHONPATH (ctest sets it
to the checkout's analysis/); fixtures.py beside this file is found by pytest, which puts this folder on the path of
the tests it collects here."""

import glob
import os

import pytest

import fixtures

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))

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
