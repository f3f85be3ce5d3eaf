"""Word lists shared by the deterministic checks: stop-words and per-language function words."""

from __future__ import annotations

#: English function words and chat fillers dropped before comparing replies. Words that carry
#: the content of an instruction (`try`, `then`, `please`, `again`, negations) are kept.
STOP_WORDS: frozenset[str] = frozenset(
    """
    a an the and or but if of to in on at by for with from as into onto about over under up down out off
    is are was were be been being am do does did doing done have has had having get got
    i me my mine myself you your yours yourself yourselves he him his himself she her hers herself
    it its itself we us our ours ourselves they them their theirs themselves one
    this that these those what which who whom whose there here where when how why
    so too very just really quite also still even
    can could will would shall should may might must
    im ive id ill youre youve youd youll hes shes its were weve theyre theyve thats theres whats heres
    lets dont doesnt didnt isnt arent wasnt werent havent hasnt hadnt wont wouldnt cant couldnt shouldnt
    all any some each both more most other such own same than s t d ll m re ve
    yes no ok okay yeah yep oh ah well um uh hmm hi hello hey thanks thank sure
    """.split()
)

#: Frequent function words per language, for a stdlib-only guess of the language of Latin-script text.
LANGUAGE_WORDS: dict[str, frozenset[str]] = {
    "en": frozenset("the and is are you that this with for have not what was it of to in my your".split()),
    "es": frozenset("el la los las que es por para con una del pero como estás usted está muy gracias".split()),
    "fr": frozenset("le la les des est et une vous nous que pour pas avec dans mais je suis merci".split()),
    "de": frozenset("der die das und ist nicht ich sie mit ein eine auch für sie wir danke bitte".split()),
    "pt": frozenset("o os que é não uma para com você está obrigado muito mas por isso".split()),
    "it": frozenset("il che è non una per con sono della anche grazie molto questo perché ciao".split()),
}
