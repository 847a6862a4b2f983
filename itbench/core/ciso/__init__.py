"""The CISO persona's pure parts: the compliance environment as data (the hardened namespace and
a RHEL9 host), the misconfigurations scenarios inject, the classes of scenario, and how the
platform's verdicts become a posture score."""
