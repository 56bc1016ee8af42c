"""Simulated Ascend cluster: nodes made of Linux namespaces with faithful fake vendor tools."""
