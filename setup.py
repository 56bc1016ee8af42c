"""Package discovery for the mapped layout (pyproject.toml holds all metadata).

The design-card folders (checks/, training/, provision/) sit at the top level but import as
ascend_ready.checks, ascend_ready.training and ascend_ready.provision; this lists every
sub-package under each mapped folder so nobody has to edit a package list by hand.
"""

from setuptools import find_packages, setup

MAPPED = {"ascend_ready.checks": "checks", "ascend_ready.training": "training",
          "ascend_ready.provision": "provision"}

packages = find_packages("src")
for name, folder in MAPPED.items():
    packages.append(name)
    packages += [f"{name}.{sub}" for sub in find_packages(folder)]

setup(packages=packages)
