"""Stand-ins for the machine-learning packages Oobleck's planning tests import but whose
planning paths do not use (torch, deepspeed, transformers, datasets, simple_parsing, ...),
so that Oobleck's own test files run on a machine without them, against oobleck-planner.

Importing this module appends a finder to sys.meta_path that makes up any module under
STANDIN_ROOTS which is not installed (a real package, when present, is found first). A
made-up module answers every attribute with an inert `Standin` class (callable, any
arguments, attributes all stand-ins); the few names whose value matters to the tests'
code paths are given real behaviour in OVERRIDES: no CUDA, rank 0, no-op collectives,
DataLoader/BatchSampler that keep their arguments, a TrainingArguments with Hugging Face's
defaults. Usable as a pytest plugin: `python -m pytest -p standin_modules ...` with this
directory on PYTHONPATH (scripts/run-oobleck-tests.sh does that).
"""

import importlib.abc
import importlib.machinery
import logging
import sys
import types

STANDIN_ROOTS = ("torch", "torchvision", "deepspeed", "transformers", "datasets",
                 "simple_parsing", "pyomo", "evaluate")


class _StandinMeta(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Standin


class Standin(metaclass=_StandinMeta):
    """Anything at all, doing nothing: accepts any arguments, every attribute and call
    result is another stand-in, iterates as empty."""

    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Standin()

    def __call__(self, *args, **kwargs):
        return Standin()

    def __iter__(self):
        return iter(())

    def __len__(self):
        return 0

    def __getitem__(self, key):
        return Standin()


def _noop(*args, **kwargs):
    return None


def _false(*args, **kwargs):
    return False


def _zero(*args, **kwargs):
    return 0


class _KeepArguments:
    """A base class that keeps its constructor's keyword arguments as attributes."""

    def __init__(self, *args, **kwargs):
        self.args = args
        for name, value in kwargs.items():
            setattr(self, name, value)


class DataLoader(_KeepArguments):
    def __init__(self, dataset=None, batch_size=1, shuffle=None, sampler=None,
                 batch_sampler=None, **kwargs):
        super().__init__(**kwargs)
        self.dataset = dataset
        self.batch_size = batch_size
        self.sampler = sampler
        self.batch_sampler = batch_sampler


class TrainingArguments:
    """transformers.TrainingArguments with the defaults the tests' code paths read."""
    DEFAULTS = {"output_dir": "/tmp/output", "per_device_train_batch_size": 8,
                "per_device_eval_batch_size": 8, "gradient_accumulation_steps": 1,
                "dataloader_num_workers": 0, "dataloader_pin_memory": True, "max_steps": -1,
                "no_cuda": False, "log_level": "passive", "seed": 42}

    def __init__(self, output_dir=None, **kwargs):
        for name, value in self.DEFAULTS.items():
            setattr(self, name, value)
        if output_dir is not None:
            self.output_dir = output_dir
        for name, value in kwargs.items():
            setattr(self, name, value)


class LoggerFactory:
    @staticmethod
    def create_logger(name=None, level=logging.INFO):
        return logging.getLogger(name or "standin")


_COLLECTIVES = {"is_initialized": _false, "init_process_group": _noop,
                "init_distributed": _noop, "destroy_process_group": _noop,
                "new_group": _noop, "get_rank": _zero, "get_world_size": lambda *a, **k: 1,
                "barrier": _noop, "broadcast": _noop, "all_reduce": _noop,
                "ProcessGroup": Standin}

OVERRIDES = {
    "torch.cuda": {"is_available": _false, "device_count": _zero, "current_device": _zero,
                   "synchronize": _noop},
    "torch.distributed": dict(_COLLECTIVES),
    "torch.utils.data": {"DataLoader": DataLoader, "BatchSampler": _KeepArguments,
                         "Sampler": _KeepArguments, "Dataset": _KeepArguments},
    "deepspeed.comm": dict(_COLLECTIVES),
    "deepspeed.utils": {"logger": logging.getLogger("deepspeed")},
    "deepspeed.utils.logging": {"LoggerFactory": LoggerFactory},
    "transformers": {"TrainingArguments": TrainingArguments},
    "transformers.training_args": {"TrainingArguments": TrainingArguments},
    "simple_parsing": {"Serializable": object},
}


def _module_getattr(module_name):
    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        # A submodule imported as an attribute (torch.cuda) is a module, anything else a
        # Standin class; kept, so that every lookup sees the same object.
        full = f"{module_name}.{name}"
        value = importlib.import_module(full) if full in OVERRIDES or name in (
            "cuda", "distributed", "utils", "comm", "data") else Standin
        setattr(sys.modules[module_name], name, value)
        return value
    return __getattr__


class StandinLoader(importlib.abc.Loader):
    def create_module(self, spec):
        module = types.ModuleType(spec.name, f"stand-in for {spec.name} (tests/oobleck_compat)")
        module.__path__ = []  # a package, so that any submodule can be imported
        return module

    def exec_module(self, module):
        module.__dict__.update(OVERRIDES.get(module.__name__, {}))
        module.__getattr__ = _module_getattr(module.__name__)
        parent, _, leaf = module.__name__.rpartition(".")
        if parent in sys.modules:
            setattr(sys.modules[parent], leaf, module)


class StandinFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] not in STANDIN_ROOTS:
            return None
        return importlib.machinery.ModuleSpec(fullname, StandinLoader(), is_package=True)


def install():
    if not any(isinstance(finder, StandinFinder) for finder in sys.meta_path):
        sys.meta_path.append(StandinFinder())  # last: installed packages win


install()
