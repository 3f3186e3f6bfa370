"""The option groups of `simcli bench`: the worlds a bench runs (WorldOptions) and the model `bench step` trains
(ModelShapeOptions), declared once as the other groups are (:mod:`simcli.cli.options`)."""

from __future__ import annotations

import dataclasses
import enum
from typing import Annotated, Optional

from ..base.types import InputError
from ..bench import models as bench_models
from ..bench import runs as bench_runs
from .options import OptionGroup, enum_members, option

__all__ = ["WorldOptions", "ModelShapeOptions", "Backend", "ModelKind", "StepDtype"]

# choices built from the domain tuples (members from the registry: mypy sees enums without members)
Backend = enum.Enum("Backend", enum_members(bench_runs.BACKENDS), type=str)  # type: ignore[misc]
#: what ``bench step`` trains, and in which compute dtype (the tuples of simcli.bench.models)
ModelKind = enum.Enum("ModelKind", enum_members(bench_models.KINDS), type=str)  # type: ignore[misc]
StepDtype = enum.Enum("StepDtype", enum_members(bench_models.DTYPES), type=str)  # type: ignore[misc]

WorldSizes = Annotated[
    Optional[str],
    option(
        "--world-sizes",
        "-k",
        help="Ranks per world, one fresh world each: '2,4', '1..4'. Under torchrun: the launcher's WORLD_SIZE.",
    ),
]
BackendOpt = Annotated[
    Backend, option("--backend", help="torch.distributed backend; auto: nccl with CUDA devices, gloo otherwise.")
]
Warmup = Annotated[int, option("--warmup", min=0, help="Untimed iterations before timing.")]
Timeout = Annotated[
    float,
    option(
        "--timeout",
        min=1,
        help="Seconds a world may go without any rank "
        "starting a new size or step (start-up gets at least 120 s); then every "
        "rank is stopped and the command exits 1.",
    ),
]
Port = Annotated[
    int, option("--port", help="TCP port of the rendezvous on 127.0.0.1 [default: a free one per world size].")
]
Threads = Annotated[
    Optional[int],
    option(
        "--threads",
        min=1,
        help="torch threads per rank on CPU, the same in every world "
        "[default: cores // largest world size, at least 1].",
    ),
]
Oversubscribe = Annotated[
    bool,
    option(
        "--oversubscribe", help="Allow more CPU ranks than max(4, 2 x cores) (the times then measure the scheduler)."
    ),
]


@dataclasses.dataclass(frozen=True)
class WorldOptions(OptionGroup):
    """Where and how ``bench allreduce`` and ``bench step`` run their ranks: --world-sizes, --backend, --warmup,
    --timeout, --port, --threads, --oversubscribe (simcli.bench.runs reads them)."""

    world_sizes: WorldSizes = None
    backend: BackendOpt = Backend("auto")
    warmup: Warmup = 5
    timeout: Timeout = 300.0
    port: Port = 0
    threads: Threads = None
    oversubscribe: Oversubscribe = False


@dataclasses.dataclass(frozen=True)
class ModelShapeOptions(OptionGroup):
    """The model ``bench step`` trains: --model and each kind's shape (mlp, gpt, resnet); :meth:`spec` checks them."""

    model: Annotated[
        ModelKind,
        option(
            "--model",
            "-m",
            metavar="mlp|gpt|resnet",
            autocompletion=None,  # not the presets: the models bench step trains
            help="Model to train: mlp (--depth "
            "Linear(width, width) layers), gpt (a GPT-style decoder stack: "
            "--layers, --hidden, --heads, --seq-len, --vocab), resnet "
            "(bottleneck blocks: --model-width, --blocks, --image-size, --classes).",
        ),
    ] = ModelKind("mlp")
    width: Annotated[
        Optional[int],
        option(
            "--model-width",
            min=1,
            help="mlp: layer width [default: "
            "1024]; resnet: the first stage's bottleneck width [default: "
            "16]. (Not --width, which is a picture's width elsewhere.)",
        ),
    ] = None
    old_width: Annotated[
        Optional[int], option("--width", min=1, hidden=True, help="Old spelling of --model-width.")
    ] = None
    depth: Annotated[int, option("--depth", min=1, help="MLP layers.")] = 8
    params: Annotated[
        Optional[float],
        option("--params", help="Size the MLP to about this many parameters (sets the width for --depth)."),
    ] = None
    layers: Annotated[int, option("--layers", min=1, help="gpt: decoder blocks.")] = 2
    hidden: Annotated[int, option("--hidden", min=1, help="gpt: hidden size.")] = 128
    heads: Annotated[int, option("--heads", min=1, help="gpt: attention heads (must divide --hidden).")] = 4
    seq_len: Annotated[int, option("--seq-len", min=1, help="gpt: tokens per sample.")] = 128
    vocab: Annotated[
        int, option("--vocab", min=2, help="gpt: vocabulary (the tied embedding and head; GPT-2: 50257).")
    ] = 1024
    blocks: Annotated[
        str,
        option(
            "--blocks", help="resnet: bottleneck blocks per stage, the width doubling per stage (ResNet-50: 3,4,6,3)."
        ),
    ] = "1,1,1,1"
    image_size: Annotated[
        int,
        option(
            "--image-size",
            min=8,
            help="resnet: image side in pixels (64 or more: ResNet-50's 7x7/2 stem and max pool; less: a 3x3/1 stem).",
        ),
    ] = 32
    classes: Annotated[int, option("--classes", min=2, help="resnet: classifier outputs.")] = 10

    def __post_init__(self) -> None:
        if self.old_width is not None:  # --width, the old spelling, becomes --model-width
            if self.width is not None:
                raise InputError(
                    "--width and --model-width are the same option (--width is its old spelling); give one"
                )
            object.__setattr__(self, "width", self.old_width)
            object.__setattr__(self, "old_width", None)

    def spec(self, batch: int) -> bench_models.ModelSpec:
        """The model's shape, every value checked (one line per bad option); ``batch`` samples per rank."""
        from ..bench.step import mlp_width_for_params  # lazy

        kind, width = ModelKind(self.model).value, self.width
        if self.params is not None:
            if kind != "mlp":
                raise InputError(f"--params: sizes the mlp only; give --model {kind}'s shape options instead")
            if not self.params >= 1:
                raise InputError(f"--params: {self.params!r} must be at least 1")
            width = mlp_width_for_params(self.params, self.depth)
        if kind == "gpt" and self.hidden % self.heads:
            raise InputError(
                f"--heads: {self.heads} does not divide --hidden {self.hidden}; give heads that divide the hidden size"
            )
        try:
            bl = tuple(int(x) for x in self.blocks.split(","))
        except ValueError:
            bl = ()
        if not bl or any(x < 1 for x in bl) or len(bl) > 6:
            raise InputError(
                f"--blocks: {self.blocks!r} is not 1 to 6 whole numbers >= 1 separated by commas (e.g. 3,4,6,3)"
            )
        shape = self.copied("depth", "layers", "hidden", "heads", "seq_len", "vocab", "image_size", "classes")
        spec = bench_models.ModelSpec(kind=kind, width=width or 0, blocks=bl, **shape)
        if kind == "resnet":
            side = bench_models.resnet_final_size(spec)
            if side < 1 or batch * side * side < 2:
                raise InputError(
                    f"--image-size: {self.image_size} px leaves {max(side, 0)}x{max(side, 0)} pixels after "
                    f"{len(bl)} stages, too few for BatchNorm with batch {batch}; give a larger --image-size "
                    "or fewer --blocks stages"
                )
        return spec
