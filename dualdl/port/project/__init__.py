"""Converting a whole Gluon project's source to PyTorch source (``dualdl convert-project``) and
proving the converted script's run is the Gluon script's (``prove_scripts``)."""
from .api import ProjectError, ProjectReport, convert_project, runtime_source

__all__ = ["convert_project", "ProjectReport", "ProjectError", "runtime_source"]
