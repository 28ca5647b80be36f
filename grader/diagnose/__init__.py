"""Diagnosis: symptoms the outputs show, catalogued mistakes reproduced, a name only when it explains the failure."""
