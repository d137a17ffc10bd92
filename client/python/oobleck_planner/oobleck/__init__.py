"""Oobleck's planner, served by oobleck-planner: drop-in replacements for the two modules
Oobleck's engine and master daemon import in-process,

  oobleck.csrc.planning.pipeline_template  ->  oobleck_planner.oobleck.pipeline_template
  oobleck.planning.instantiator            ->  oobleck_planner.oobleck.instantiator

with Oobleck's names, signatures and attributes, answered by the service at
OOBLECK_PLANNER_ADDRESS (default 127.0.0.1:50051; TLS CA, server name and token from the
same environment variables as the CLI). No torch and no GPU are needed to plan.

Put them in place of Oobleck's before Oobleck's code imports them:

    import oobleck_planner.oobleck
    oobleck_planner.oobleck.install()     # registers both names in sys.modules

or `import oobleck_planner.oobleck.shadow` (which calls install()), e.g. as a pytest plugin
(`python -m pytest -p oobleck_planner.oobleck.shadow ...`) or from a sitecustomize.py.

Settings (environment; the generator also takes them as keywords):
  OOBLECK_PLANNER_COST_MODEL      "oobleck-sosp23" (default: Oobleck's objective) or "1f1b"
  OOBLECK_PLANNER_OOBLECK_BRANCH  "sosp23-artifact" (default) or "develop": the branch whose
      semantics to follow. sosp23-artifact: a stage of g GPUs reads allreduce_in_node[g - 1]
      and uses a divisor of the node's GPUs; develop: allreduce_in_node[g] and one stage per
      node or two of half each.
  OOBLECK_PLANNER_PROFILE_DIR     where get_profile_results reads (/tmp/oobleck/profiles)
  OOBLECK_PLANNER_TIMEOUT_S       deadline of one call (default 120 s)
Errors of the service are raised as oobleck_planner.oobleck.InvalidArgument (a ValueError),
FailedPrecondition (a RuntimeError), NotFound or ServiceUnavailable, with its message.
"""

import importlib
import sys

from oobleck_planner.oobleck._service import (BRANCHES, FailedPrecondition, InvalidArgument,
                                              NotFound, PlannerError, ServiceUnavailable)

# Oobleck's module name -> ours.
SHADOWED_MODULES = {
    "oobleck.csrc.planning.pipeline_template": "oobleck_planner.oobleck.pipeline_template",
    "oobleck.planning.instantiator": "oobleck_planner.oobleck.instantiator",
}


def install():
    """Makes `import oobleck.csrc.planning.pipeline_template` and `import
    oobleck.planning.instantiator` give this package's modules (also as attributes of their
    parent packages when Oobleck itself is importable). Call it before Oobleck's code
    imports them; calling it again does nothing more."""
    for oobleck_name, our_name in SHADOWED_MODULES.items():
        module = importlib.import_module(our_name)
        sys.modules[oobleck_name] = module
        parent_name, _, leaf = oobleck_name.rpartition(".")
        try:
            parent = importlib.import_module(parent_name)
        except ImportError:
            continue  # no Oobleck checkout on the path: sys.modules alone serves imports
        setattr(parent, leaf, module)
    return [sys.modules[name] for name in SHADOWED_MODULES]


def installed():
    """True when both Oobleck names resolve to this package's modules."""
    return all(getattr(sys.modules.get(name), "__name__", None) == ours
               for name, ours in SHADOWED_MODULES.items())


__all__ = ["BRANCHES", "FailedPrecondition", "InvalidArgument", "NotFound", "PlannerError",
           "SHADOWED_MODULES", "ServiceUnavailable", "install", "installed"]
