"""Who is calling and what they may do: authentication, access, rate limits, login throttle."""
