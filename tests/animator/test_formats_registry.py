"""The format registry is a light leaf: the app reads it without loading the renderer."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

HEAVY = ("numpy", "PIL", "scipy", "animator.api", "animator._frame_scan", "animator._raster")


def _loaded_after(statement: str) -> list[str]:
    code = f"import sys; {statement}; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_importing_the_app_loads_neither_numpy_nor_pillow_nor_the_kernels():
    assert _loaded_after("import app") == []


def test_the_format_names_load_nothing_heavy_and_the_renderer_loads_on_first_use():
    assert _loaded_after("from animator.formats import FORMATS; import animator; animator.FORMATS") == []
    assert "animator.api" in _loaded_after("import animator; animator.render")


def test_every_format_has_a_module_and_one_kind():
    from animator import formats
    from animator.formats import registry

    kinds = registry.INDEXED_FORMATS + registry.FRAME_FORMATS + registry.RIG_FORMATS
    assert sorted(kinds) == sorted(formats.FORMATS) and len(set(kinds)) == len(kinds)
    modules = {"glb": "gltf"}
    for name in formats.FORMATS:
        assert (ROOT / "animator" / "formats" / f"{modules.get(name, name)}.py").is_file(), name


def test_the_retarget_function_is_not_replaced_by_its_module():
    import animator
    import animator.retarget  # noqa: F401 - the submodule loads after the package

    assert callable(animator.retarget) and animator.retarget.__name__ == "retarget"
