"""The helpers the tests share (no tests here): `from tests.helpers.mounting import mounted`.
Where a module's tests are, and the rest of the layout: docs/development.md, "Layout of the tests"."""
