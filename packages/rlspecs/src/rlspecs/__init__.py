"""Typed tensor specs: shapes, dtypes, devices and domains of reinforcement-learning data."""

from ._api import set_spec_api, spec_api
from ._base import DEVICE_TYPING, TensorSpec, parse_device, parse_shape
from ._bounded import Bounded
from ._categorical import Binary, Categorical, MultiCategorical
from ._choice import Choice
from ._composite import Composite
from ._keys import NestedKey, is_nested_key, unravel_key
from ._non_tensor import NonTensor
from ._one_hot import MultiOneHot, OneHot
from ._spaces import BinaryBox, Box, BoxList, CategoricalBox, ContinuousBox, DiscreteBox
from ._stack import Stacked
from ._stacked_composite import StackedComposite, stack_specs
from ._unbounded import Unbounded
from ._utils import check_no_exclusive_keys, consolidate_spec, make_composite_from_td
from ._version import __version__
from .errors import SpecDomainError, SpecError, SpecKeyTypeError, SpecShapeError, SpecStackError

# seed-era aliases: the same class objects under torchrl's older names
CompositeSpec = Composite
UnboundedContinuousTensorSpec = Unbounded
UnboundedDiscreteTensorSpec = Unbounded
BoundedTensorSpec = Bounded
DiscreteTensorSpec = Categorical
OneHotDiscreteTensorSpec = OneHot
MultiOneHotDiscreteTensorSpec = MultiOneHot
MultiDiscreteTensorSpec = MultiCategorical
BinaryDiscreteTensorSpec = Binary
LazyStackedTensorSpec = Stacked
LazyStackedCompositeSpec = StackedComposite
NonTensorSpec = NonTensor

__all__ = [
    # base
    "TensorSpec",
    # leaves
    "Unbounded",
    "Bounded",
    "Categorical",
    "OneHot",
    "MultiOneHot",
    "MultiCategorical",
    "Binary",
    "NonTensor",
    "Choice",
    # containers and lazy stacks
    "Composite",
    "Stacked",
    "StackedComposite",
    # domains
    "Box",
    "ContinuousBox",
    "CategoricalBox",
    "DiscreteBox",
    "BinaryBox",
    "BoxList",
    # errors (rlspecs.errors)
    "SpecError",
    "SpecShapeError",
    "SpecStackError",
    "SpecKeyTypeError",
    "SpecDomainError",
    # which torchrl release rlspecs follows where 0.4 and current torchrl differ
    "set_spec_api",
    "spec_api",
    # helpers
    "stack_specs",
    "make_composite_from_td",
    "consolidate_spec",
    "check_no_exclusive_keys",
    "NestedKey",
    "is_nested_key",
    "unravel_key",
    "parse_device",
    "parse_shape",
    "DEVICE_TYPING",
    "__version__",
    # seed-era aliases
    "CompositeSpec",
    "UnboundedContinuousTensorSpec",
    "UnboundedDiscreteTensorSpec",
    "BoundedTensorSpec",
    "DiscreteTensorSpec",
    "OneHotDiscreteTensorSpec",
    "MultiOneHotDiscreteTensorSpec",
    "MultiDiscreteTensorSpec",
    "BinaryDiscreteTensorSpec",
    "LazyStackedTensorSpec",
    "LazyStackedCompositeSpec",
    "NonTensorSpec",
]
