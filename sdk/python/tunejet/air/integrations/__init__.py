"""Ray's experiment tracking callbacks: mlflow.MLflowLoggerCallback and
wandb.WandbLoggerCallback, which need mlflow and wandb installed."""
