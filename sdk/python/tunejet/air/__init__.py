"""Ray AIR's module paths that Ray Tune scripts import
(``ray.air.integrations``): ``from tunejet.air.integrations.mlflow import
MLflowLoggerCallback``."""
