"""Projects: model + board + template -> a buildable directory (docs/projects.md).

    proj = mtvm.project.generate("kws.onnx", board="host", out_dir="build/kws")
    proj.build()
    with proj.session() as sess:
        y = sess.executor.run({"in_0": x})
"""
from .boards import list_boards, load_board
from .generate import GenerateContext, descriptor_source, generate, sample_source
from .project import PROJECT_FILE, Project, load, load_template

__all__ = ["generate", "load", "Project", "GenerateContext", "list_boards", "load_board",
           "load_template", "descriptor_source", "sample_source", "PROJECT_FILE"]
