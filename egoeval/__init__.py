"""egoeval: reproducible evaluation pipelines for EgoNormia and EgoHumans."""

__version__ = "0.1.0"
