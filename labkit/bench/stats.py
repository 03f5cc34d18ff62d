"""Statistics of repeated measurements: the median with its quartiles and its spread (lowest to highest)."""
import numpy as np


def five_number_summary(values):
    """Median, quartiles and extremes (the spread) of a list of measurements."""
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return {"median": float(median), "q1": float(q1), "q3": float(q3),
            "min": float(min(values)), "max": float(max(values))}
